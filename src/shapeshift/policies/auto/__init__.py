"""Blox's automatic policy synthesis (Agarwal et al., EuroSys 2024, Sec. 6).

:mod:`.policy` registers ``auto``, which every ``k`` rounds simulates each candidate
ordering x admission from the current state and switches to the best; :mod:`.candidates`
builds the candidates, the snapshot they start from and their score. The simulation is
handed to the policy (``shapeshift.engine.replay``): policies never import the simulator.
"""
