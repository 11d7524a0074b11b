# sources
