"""Does a swarm learn as well as one peer, and sooner (accuracy against time and bytes).

- convergence: one peer, the synchronous ideal and swarms on real processes (its results side,
  the figures, table and plot: convergence_report);
- portfolio: the learning portfolio on real processes; portfolio_sim: the same tasks in the
  lock-step simulator, to screen exchange, lr and partner rules; inflight: its rounds with a
  latency, as a peer at full speed runs them;
- own_loop: the user's own loop through `Swarm` beside the built-in loop;
- lab: the codecs on the network lab: time to the uncompressed run's accuracy (root).
"""
