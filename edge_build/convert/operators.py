"""What a converted model holds, read from its flatbuffer: operators (builtin, Flex, custom) with versions and counts, and tensor types."""

from __future__ import annotations


def inspect_model(content: bytes) -> dict:
    """Operators (with versions and counts), Flex and custom ops, and tensor types, read from the flatbuffer."""
    from tensorflow.lite.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(content), 0)
    op_names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    type_names = {v: k for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    operators: dict[tuple, int] = {}
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
            name = code.customCode.decode() if code.customCode else op_names[builtin]
            kind = "builtin" if not code.customCode else ("flex" if name.startswith("Flex") else "custom")
            operators[(name, code.version, kind)] = operators.get((name, code.version, kind), 0) + 1
    tensors = [t for subgraph in model.subgraphs for t in subgraph.tensors]

    def is_constant(tensor) -> bool:
        buffer = model.buffers[tensor.buffer]
        return buffer.data is not None and len(buffer.data) > 0

    float_ops: dict[str, int] = {}
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex]
            outputs = [subgraph.tensors[i] for i in op.outputs if i >= 0]
            if not code.customCode and any(type_names[t.type] == "FLOAT32" and not is_constant(t) for t in outputs):
                name = op_names[max(code.builtinCode, code.deprecatedBuiltinCode)]
                float_ops[name] = float_ops.get(name, 0) + 1
    tensor_types: dict[str, int] = {}
    for tensor in tensors:
        tensor_types[type_names[tensor.type]] = tensor_types.get(type_names[tensor.type], 0) + 1
    return {
        "operators": [{"op": name, "version": version, "kind": kind, "count": count} for (name, version, kind), count in sorted(operators.items())],
        "flex_ops": sorted({name for name, _, kind in operators if kind == "flex"}),
        "custom_ops": sorted({name for name, _, kind in operators if kind == "custom"}),
        "tensor_types": dict(sorted(tensor_types.items())),
        "float_ops": dict(sorted(float_ops.items())),
        "float_activations": sorted(t.name.decode() for t in tensors if type_names[t.type] == "FLOAT32" and not is_constant(t)),
        "float_constants": sorted(t.name.decode() for t in tensors if type_names[t.type] == "FLOAT32" and is_constant(t)),
    }
