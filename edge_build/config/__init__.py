"""Configuration as data, one module per audience.

``hparams`` (what training reads), ``profile`` (what conversion and the checks
read), ``calibration`` (what the representative set is drawn from); ``loading``
turns a TOML table into their frozen dataclasses. Standard library only, so
``SConstruct`` can validate every file before it schedules anything, and a
change to one audience's settings reruns only the stages that import it.
"""
