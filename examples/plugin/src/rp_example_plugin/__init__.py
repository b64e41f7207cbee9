"""Example recourse-privacy plugin: importing this package registers one attack and one recourse method."""

from rp_example_plugin import attack, recourse

__all__ = ["attack", "recourse"]
