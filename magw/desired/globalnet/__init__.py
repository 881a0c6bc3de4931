"""Globalnet on one node: which addresses its datapath translates, and its part of the nft table. Pure."""
