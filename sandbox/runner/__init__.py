"""The sandbox runner: a standard-library-only program run inside a container or bwrap.

Process roles (one job = one client connection at a time):

    server (zygote)     accepts connections; forks one supervisor per connection
    supervisor (root)   reads jobs, drives the test plan, enforces limits, reports events
    spawner (root)      forked before any job is read; forks pristine candidate processes
    candidate (uid A)   loads the program; answers calls with plain data; never sees tests
    verdict (uid B)     runs the test code against proxies of the candidate; decides verdicts

The candidate and the verdict process never share memory, a uid, or a channel other than
the supervisor's relay of call arguments and plain-data return values.
"""
