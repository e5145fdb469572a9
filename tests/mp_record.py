"""A callback for tests/test_multiprocess.py that travels to launched processes (pickled with the call): it records, per
rank, what each GRPO generation round handed to the loss: every rollout's advantage and its trained tokens."""
import json
from pathlib import Path
from transformers import TrainerCallback


class RecordRounds(TrainerCallback):
    "Appends {advantages, tokens} of each generation round to `folder/rank<R>.jsonl` (tokens: completion mask x tool mask)."
    def __init__(self, folder): self.folder = str(folder)

    def on_train_begin(self, args, state, control, **kwargs):
        import speco3.grpo as g
        cls, path = g._GRPOTrainer, Path(self.folder) / f"rank{args.process_index}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.build = build = cls.__dict__.get("_generate_and_score_completions")
        parent = super(g._GRPOTrainer, g._GRPOTrainer)._generate_and_score_completions if build is None else build
        def keep(trainer, inputs):
            out = parent(trainer, inputs)
            mask = out["completion_mask"] if out.get("tool_mask") is None else out["completion_mask"] * out["tool_mask"]
            with open(path, "a") as f:
                f.write(json.dumps(dict(advantages=out["advantages"].tolist(), tokens=mask.sum(1).tolist())) + "\n")
            return out
        cls._generate_and_score_completions = keep

    def on_train_end(self, args, state, control, **kwargs):
        import speco3.grpo as g
        if self.build is None: del g._GRPOTrainer._generate_and_score_completions
        else: g._GRPOTrainer._generate_and_score_completions = self.build


def rounds(folder):
    "{rank: [round, ...]} recorded in `folder`."
    return {int(p.stem[4:]): [json.loads(l) for l in p.read_text().splitlines()] for p in sorted(Path(folder).glob("rank*.jsonl"))}


def step_loss(folder, round_=0):
    "The GRPO loss of one round's rollouts over every rank, at a step whose policy is the sampling one (ratio 1, no KL): -sum(A·L)/sum(L)."
    rs = [r[round_] for r in rounds(folder).values()]
    num = sum(a * t for r in rs for a, t in zip(r["advantages"], r["tokens"]))
    return -num / sum(t for r in rs for t in r["tokens"]), sum(len(r["advantages"]) for r in rs)


class KillAfterSave(TrainerCallback):
    "Stops a run right after its checkpoint of `step` is on disk, in every process, as a kill would."
    def __init__(self, step): self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step: raise RuntimeError("simulated kill")
