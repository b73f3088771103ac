"""Cluster energy saving (CES, from Helios): forecast node demand, power idle nodes down.

``forecast`` predicts active nodes per bin, ``ces`` is the control rule, ``replay`` runs
it over a recorded node series and ``sim_component`` runs it inside a simulation.
"""
