"""Fault injection: transport wrappers, byzantine behaviours, the chaos scenario runner."""
