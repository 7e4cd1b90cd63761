"""The learning agent: Q-networks, the learner (TD target, loss, optimizer), frame-saving
replay, epsilon-greedy policy and its schedule, and TensorFlow's process settings. Knows
nothing of games, loops or runs."""
