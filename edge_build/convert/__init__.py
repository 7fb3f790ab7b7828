"""The conversion wing: one module per model interface (``edge_build.interfaces``) and what they share.

``ids``, ``text``, ``tasks`` and ``scores`` each make a model of their interface from
the trained Keras model (``convert(job)``); ``converter`` sets up TensorFlow's converter
and runs TensorFlow's interpreter, ``ladder`` climbs the quantization ladder (its
recipes are a table beside the artifact and interface tables, ``edge_build.recipes``,
which the profile reads), ``metadata`` writes every model's TF Lite metadata, ``operators`` reads a model's
operators and tensors, ``gates`` checks a model on the profile's runtimes and
against the Keras model, and ``job`` holds what a conversion reads and returns.
The tflite stage (``edge_build.stages.tflite``) looks up the artifact's interface,
calls its converter and writes the record.
"""
