"""Abstracts: the OpenAlex client, and the database cache and prefetcher over it."""
