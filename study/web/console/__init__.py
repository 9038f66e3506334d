"""The experimenter console: its views, logins, the live view, holds and
counterbalancing."""
