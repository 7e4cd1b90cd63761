"""Speed, memory, learning and crash benchmarks. Run each from the repository root as
`python -m benchmarks.NAME --help`; results and their tables are in docs/benchmarks.md."""
