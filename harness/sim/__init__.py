"""The bundled simulated accelerator server: an OpenAI-compatible endpoint with no model behind it."""
