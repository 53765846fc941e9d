"""rlgpt: RL-GPT (LLM agents that write code-as-policy skills and drive RL) as gRPC microservices."""

__version__ = "0.1.0"
