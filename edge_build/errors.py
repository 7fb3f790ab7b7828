"""Errors a user can act on, each reported as one line and a non-zero exit.

EdgeBuildError          base class; ``cli.run`` turns it into ``error: <message>`` and exit 2
├── ConfigError         a TOML file (target profile, hyperparameters) is malformed or invalid
├── DatasetError        the dataset cannot be read, is not text, or cannot be split
└── StageError          a stage's inputs are inconsistent or its result failed a check
    ├── QualityGateError  the reference model does not clear the baselines on the test split
    └── BoardFault        a board could not be checked: unreachable, refused, missing software, crashed, too slow (ssh.py)

Messages name the file (and key or value) and what is allowed.  Anything else
that escapes a stage is a bug in edge-build and keeps its traceback.
"""


class EdgeBuildError(Exception):
    """A problem with the user's input or the build's state, stated in one line."""


class ConfigError(EdgeBuildError):
    """Raised when a configuration file is malformed, has unknown keys or wrong values."""


class DatasetError(EdgeBuildError):
    """Raised when a dataset is missing, empty, not text, or too small to split."""


class StageError(EdgeBuildError):
    """Raised when a stage's inputs do not fit together or its output fails verification."""


class QualityGateError(StageError):
    """Raised when the reference model falls behind the classical baseline or does not beat the majority class."""
