"""The ``slurm`` policy: Slurm's multifactor priority, main scheduler and backfill
(``policy``), with the fair-share tree (``fairshare``), the priority factors
(``priority``) and the backfill plan (``plan``) in their own modules."""
