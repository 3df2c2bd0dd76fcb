"""The agent layer: LLM configuration, the tool-using agent."""
