"""Sources: live scrape, PromQL and trace replay, all producing samples for the series store."""
