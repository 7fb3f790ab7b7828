"""The build's stages: each one a module run as ``python -m edge_build.stages.<name>``, from files to files.

Nothing imports a stage (``tests/test_structure.py`` checks it): what stages
share lives in the library modules of ``edge_build``, so a stage's code
dependencies (``scons_support.stage_code``) are exactly the code it runs.
"""
