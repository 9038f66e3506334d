"""The participant's study: the journey's state machine and its parts, the pages'
state, the socket events and the start links."""
