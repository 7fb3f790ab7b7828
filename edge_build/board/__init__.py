"""Code that runs where the model is deployed.

Everything in this package imports only the standard library, numpy and a TF
Lite interpreter (``tflite_runtime`` or ``ai_edge_litert``), runs in its own
process (tflite_runtime and TensorFlow cannot share one), and is meant to be
copied onto a board as it is.
"""
