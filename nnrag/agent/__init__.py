"""The agent: a tool-using LLM over the block tools."""
