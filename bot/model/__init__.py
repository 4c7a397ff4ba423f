"""Plain typed data that crosses bot's layers (a use case builds it, renderers and front ends read it),
as matcher.model does for diagnoses. No I/O here, and no import of any other part of bot."""
