"""The games: ALE emulators and gymnasium envs, their preprocessing, and the sampler backends
that step W of them together. They import nothing of fast_dqn but its top-level modules."""
