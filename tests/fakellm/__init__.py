"""fakellm: a scripted OpenAI-compatible chat-completions server for tests."""
