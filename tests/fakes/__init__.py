"""Test doubles of outside services that cannot run here (named as such in each module)."""
