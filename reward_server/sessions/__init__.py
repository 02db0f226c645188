"""Stateful sessions on the server's side: the HTTP models (`models`) and the manager (`manager`)
that keeps ids, TTLs, idle timeouts, labels and the cap on live sessions around the sandbox's
`SessionRunner`."""
