"""Model audit: a user's own nn.Module checked under every precision policy and backend (`precfuzz audit`)."""
