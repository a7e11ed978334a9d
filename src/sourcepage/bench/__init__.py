"""Speed and scale: bench (latency beside peers), scale (10^5–10^6 chunks), dense_scale
(approximate vs exact dense search), load (the web API under concurrent clients), startup
(the cold one-shot search and the first web search)."""
