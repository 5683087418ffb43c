"""Lab scenarios with their own checks (placeholder, filled below)."""
