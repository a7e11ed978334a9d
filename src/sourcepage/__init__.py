"""sourcepage: page-level evidence retrieval for safety documents."""
