"""Trainer-side integrations: reward functions for TRL and verl that call the server over HTTP."""
