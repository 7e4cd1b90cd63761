"""The games: ALE emulators and gymnasium envs, their preprocessing, and the sampler backends
that step W of them together. Imports nothing else of fast_dqn but its errors."""
