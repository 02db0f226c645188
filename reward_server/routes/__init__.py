"""HTTP routes by domain: /v1/score, the ops routes, and the server side of other stacks."""
