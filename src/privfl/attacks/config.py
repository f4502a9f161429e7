"""The ``attack`` section of a ``privfl run`` configuration (poisoning attacks of Xie et al. 2023).

Kept free of :mod:`privfl.config.schema` (which imports it) and of torch. The section says who
attacks and how; :func:`privfl.attacks.poisoning.poison` applies it to a federated dataset and
the algorithms that support it (``FederatedConfig.ATTACKS``) report its success per round.

``kind``
    ``none`` (default), ``backdoor`` (pixel trigger + target label, Bagdasaryan et al. 2020),
    ``label-flip`` (labels set to the target, Fung et al. 2020), ``dba`` (distributed backdoor:
    each attacker stamps one piece of the trigger, Xie et al. 2020), ``scaling`` (model
    replacement: the backdoor, with every attacker update multiplied by ``scale`` gamma before
    the server clips it, Bagdasaryan et al. 2020).
``level``
    ``user``: ``attackers`` = k malicious clients, each poisoning a ``fraction`` of its records
    (default all of them, as Xie et al. 2023); ``instance``: ``attackers`` = k poisoned records,
    all in one client (the paper's worst case).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from privfl.attacks.triggers import pattern_pixels

__all__ = ["ATTACK_KINDS", "DEFAULT_SCALE", "AttackConfig", "TriggerConfig"]

#: The kinds ``attack.kind`` accepts besides ``none``.
ATTACK_KINDS = ("backdoor", "label-flip", "dba", "scaling")
#: gamma of ``kind: scaling`` when ``scale`` is not given (Xie et al. 2023's default).
DEFAULT_SCALE = 50.0
#: Why update scaling is refused by an algorithm without server-side clipping of each update.
_SCALING_NEEDS = ("update scaling needs a server that clips every client's update before "
                  "aggregating (dp-fedavg)")


class TriggerConfig(BaseModel):
    """The backdoor trigger (backdoor, dba, scaling)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    pattern: Literal["paper", "paper-corrected", "custom"] = Field(
        "paper", description="paper: Xie et al. 2023's triangle as printed (15 distinct "
        "pixels); paper-corrected: 16 pixels; custom: give pixels")
    pixels: list[tuple[int, int]] | None = Field(
        None, description="custom: [row, col] pairs")
    value: float = Field(1.0, description="value written on every channel")
    space: Literal["raw", "normalized"] = Field(
        "raw", description="raw: in the stored pixel range (1.0 = white); normalized: after "
        "standardisation with the dataset's mean/std")
    anchor: Literal["absolute", "bottom-right"] = Field(
        "absolute", description="absolute: pixels as given; bottom-right: the pattern shifted "
        "into the image's lower right corner")

    @model_validator(mode="after")
    def _pixels(self) -> TriggerConfig:
        try:
            pattern_pixels(self.pattern, self.pixels)
        except ValueError as error:
            raise ValueError(f"attack.trigger.{error}") from None
        return self

    @property
    def size(self) -> int:
        """Distinct pixels of the pattern."""
        return int(pattern_pixels(self.pattern, self.pixels).shape[0])


class AttackConfig(BaseModel):
    """A simulated poisoning attack (Xie et al. 2023); ``kind: none`` trains on clean data."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    kind: Literal["none", "backdoor", "label-flip", "dba", "scaling"] = Field(
        "none", description="none, backdoor, label-flip, dba (distributed backdoor), scaling "
        "(backdoor with updates scaled by gamma)")
    level: Literal["user", "instance"] = Field(
        "user", description="user: k malicious clients; instance: k poisoned records in one "
        "client")
    attackers: int = Field(
        1, ge=0, description="k: malicious clients (user level) or poisoned records (instance "
        "level); 0 trains on clean data and still measures the attack")
    fraction: float = Field(
        1.0, gt=0, le=1, description="user level: share of each attacker's records poisoned")
    target_label: int = Field(0, ge=0, description="y*: the label the attack aims at")
    source_label: int | None = Field(
        None, ge=0, description="label-flip: flip only this class (default: every class other "
        "than the target)")
    scale: float | None = Field(
        None, gt=0, description="gamma: attacker updates multiplied by it before the server's "
        "clipping (user level; default 50 for scaling, else 1)")
    pieces: int | None = Field(
        None, ge=1, description="dba: pieces of the trigger (default: one per attacker)")
    clients: list[int] | None = Field(
        None, description="attacker clients by position (default: drawn from the seed)")
    seed: int | None = Field(
        None, ge=0, description="seed of the attacker choice (default: the run's seed)")
    trigger: TriggerConfig = Field(default_factory=TriggerConfig)

    @model_validator(mode="after")
    def _consistent(self) -> AttackConfig:
        # keys that differ from their defaults (a dumped config.yaml lists every key)
        given = {name for name, field in type(self).model_fields.items()
                 if name != "kind" and getattr(self, name) != field.get_default(
                     call_default_factory=True)}
        if self.kind == "none":
            if given:
                raise ValueError(f"attack.{sorted(given)[0]} is set but attack.kind = 'none': "
                                 f"choose one of {', '.join(ATTACK_KINDS)}")
            return self
        if self.level == "instance":
            if "fraction" in given:
                raise ValueError("attack.fraction is not allowed with attack.level = "
                                 "'instance': attack.attackers poisoned records are the attack")
            if self.kind == "scaling" or "scale" in given:
                raise ValueError("attack.scale / attack.kind = 'scaling' are not allowed with "
                                 "attack.level = 'instance': instance-level attackers follow "
                                 "the DP-SGD protocol and only poison data (Xie et al. 2023)")
        if "source_label" in given and self.kind != "label-flip":
            raise ValueError(f"attack.source_label is not allowed with attack.kind = "
                             f"{self.kind!r}: only label-flip has a source class")
        if self.source_label is not None and self.source_label == self.target_label:
            raise ValueError(f"attack.source_label = {self.source_label} is not allowed: must "
                             f"differ from attack.target_label = {self.target_label}")
        if "trigger" in given and self.kind == "label-flip":
            raise ValueError("attack.trigger is not allowed with attack.kind = 'label-flip': a "
                             "label flip changes labels only")
        if "pieces" in given and self.kind != "dba":
            raise ValueError(f"attack.pieces is not allowed with attack.kind = {self.kind!r}: "
                             "only dba splits the trigger")
        if self.kind == "dba":
            pixels = self.trigger.size
            if self.dba_pieces > pixels:
                key = "attack.pieces" if self.pieces is not None else "attack.attackers"
                raise ValueError(f"{key} = {self.dba_pieces} is out of range: the trigger has "
                                 f"{pixels} pixels, one piece needs at least one (set "
                                 f"attack.pieces <= {pixels})")
        if self.clients is not None:
            wanted = self.attackers if self.level == "user" else 1
            if len(self.clients) != wanted or len(set(self.clients)) != len(self.clients) or (
                    self.clients and min(self.clients) < 0):
                where = (f"attack.attackers = {self.attackers} distinct" if self.level == "user"
                         else "1 (instance level: the client holding the poisoned records)")
                raise ValueError(f"attack.clients = {self.clients!r} is not allowed: must list "
                                 f"{where} client positions >= 0")
        return self

    # ------------------------------------------------------------------ resolved values
    @property
    def active(self) -> bool:
        """An attack is configured (``kind != none``)."""
        return self.kind != "none"

    @property
    def gamma(self) -> float:
        """The update scale: ``scale``, else 50 for ``scaling`` and 1 otherwise."""
        if self.scale is not None:
            return float(self.scale)
        return DEFAULT_SCALE if self.kind == "scaling" else 1.0

    @property
    def dba_pieces(self) -> int:
        """Pieces of the trigger for dba: ``pieces``, else one per attacker (at least 1)."""
        return self.pieces if self.pieces is not None else max(1, self.attackers)

    @property
    def uses_trigger(self) -> bool:
        return self.kind in ("backdoor", "dba", "scaling")

    def check(self, data: Any, federated: Any) -> None:
        """Refuse an attack the configuration cannot run (ValueError naming the key).

        ``data``: the ``data`` section (``clients``, ``partition``, ``train_size``,
        ``shards_per_client``, ``shard_size``); ``federated``: the algorithm's section (its
        ``algorithm`` name and ``ATTACKS``, the kinds it runs).
        """
        if not self.active:
            return
        supported = tuple(getattr(federated, "ATTACKS", ()))
        if self.kind not in supported:
            allowed = (f"this algorithm runs {', '.join(supported)}" if supported else
                       "this algorithm declares no attack it can report (its "
                       "FederatedConfig.ATTACKS is empty)")
            if self.kind == "scaling" and supported:
                allowed = f"{_SCALING_NEEDS}; {allowed}"
            raise ValueError(f"attack.kind = {self.kind!r} is not supported by "
                             f"federated.algorithm = {federated.algorithm!r}: {allowed}")
        if self.gamma != 1.0 and "scaling" not in supported:
            raise ValueError(f"attack.scale = {self.gamma:g} is not supported by "
                             f"federated.algorithm = {federated.algorithm!r}: {_SCALING_NEEDS}")
        clients = int(data.clients)
        if self.clients is not None and max(self.clients, default=-1) >= clients:
            raise ValueError(f"attack.clients = {self.clients!r} is out of range: positions "
                             f"must be < data.clients = {clients}")
        limit = self.max_attackers(data)
        if limit is not None and self.attackers > limit:
            what = (f"data.clients = {limit} (user level: k malicious clients)"
                    if self.level == "user" else f"the attacker client's records ({limit}; "
                    "instance level: k poisoned records in one client)")
            raise ValueError(f"attack.attackers = {self.attackers} is out of range: must be <= "
                             f"{what}")

    def max_attackers(self, data: Any) -> int | None:
        """The largest ``attackers`` the ``data`` section allows at this ``level``: user level,
        ``data.clients`` (k malicious clients); instance level, the training records of one
        client (k poisoned records in it) when the section fixes them (``train_size`` with an
        iid or dirichlet partition, ``shard_size x shards_per_client`` with shards), else None
        (not known before the data are partitioned)."""
        if self.level == "user":
            return int(data.clients)
        return _records_per_client(data)


def _records_per_client(data: Any) -> int | None:
    """Training records of every client when the ``data`` section fixes them (else None)."""
    partition = getattr(data, "partition", None)
    if partition in ("iid", "dirichlet") and getattr(data, "train_size", None) is not None:
        return int(data.train_size)
    if partition == "shards" and getattr(data, "shard_size", None) is not None:
        return int(data.shard_size) * int(data.shards_per_client)
    return None
