"""A run's settings: the Config, presets, flags, precedence, validation and resolution."""
