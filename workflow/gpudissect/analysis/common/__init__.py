"""What every analysis shares: the result contract, change points, sweep steps, miss tests and GF(2)
algebra."""
