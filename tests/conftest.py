import os

# pyproject.toml puts the repository root and tests/ on sys.path.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
