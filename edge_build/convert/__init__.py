"""The conversion wing: one module per model interface (``edge_build.interfaces``) and what they share.

``ids``, ``text`` and ``tasks`` each make a model of their interface from the trained
Keras model (``convert(job)``); ``converter`` sets up TensorFlow's converter and runs
TensorFlow's interpreter, ``recipes`` and ``ladder`` are the quantization ladder,
``metadata`` writes every model's TF Lite metadata, ``operators`` reads a model's
operators and tensors, ``gates`` checks a model on the profile's runtimes and
against the Keras model, and ``job`` holds what a conversion reads and returns.
The tflite stage (``edge_build.stages.tflite``) looks up the artifact's interface,
calls its converter and writes the record. Nothing here is imported by this
package itself, so ``recipes`` stays importable without TensorFlow.
"""
