"""edge-build: a TensorFlow text classifier built from source and data into
verified per-device artifacts by an SCons build graph.

Each pipeline stage is a module run as ``python -m edge_build.stages.<stage>``; this
package's top level imports nothing heavy so that ``SConstruct`` can read
configuration without paying for TensorFlow.
"""

from edge_build.errors import ConfigError, DatasetError, EdgeBuildError, StageError

__all__ = ["ConfigError", "DatasetError", "EdgeBuildError", "StageError"]
__version__ = "0.1.0"
