"""LLM layer: one ``ChatModel`` protocol, an OpenAI-compatible client and a local llama.cpp engine."""

from medagent.llm.base import ChatModel, ChatResponse, LLMError, ToolCall, Usage, parse_chat_completion

__all__ = ["ChatModel", "ChatResponse", "LLMError", "ToolCall", "Usage", "parse_chat_completion"]
