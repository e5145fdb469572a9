"""The verl run directory (speco3.verl, from nbs/15_verl.ipynb): generation always; the tool and reward modules
against stand-ins for verl's classes always, and against verl's real classes, config schema and tool-call path when
verl is importable (it lives in its own environment, never in speco3's)."""
import ast, asyncio, configparser, importlib.util, json, os, re, subprocess, sys
from pathlib import Path
import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import optional_extra
import yaml
from PIL import Image

from speco3.profiles import VERL
from speco3.verl import (TOOL_MODULE, REWARD_MODULE, TOOL_CLASS, VERL_REQUIREMENTS, AGENT_WORKERS, ROLLOUT_N,
                         VerlProfile, export_verl, grpo_config, tool_config, response_length, core_requirements,
                         _stand_in_verl, _load_module)
from speco3.bench import write_set
from speco3.io import real_spectra_dir, read_spectrum, to_specvi_row
from speco3.prompts import chat_template, system_text, PAPER_TASKS
from speco3.reward import score
from speco3.simulate import simulate
from speco3.tool import ERROR_REWARD, TOOL_NAME, TOOL_SCHEMA, SpectralVisualizationTool

HAVE_VERL = importlib.util.find_spec("verl") is not None
NO_VERL = optional_extra("verl", "verl is not importable here: it pins transformers<5.11 and lives in its own environment "
           "(tools/verl_env.sh makes one and runs these tests there; nbs/15_verl.ipynb explains it)")
needs_verl = pytest.mark.skipif(not HAVE_VERL, reason=NO_VERL)
SLOPPY, GOOD = "It is a CV. \\boxed{YES}", "<think>Broad Balmer emission.</think><answer>\\boxed{YES}</answer>"


@pytest.fixture(scope="module")
def specvi(tmp_path_factory):
    "A SpecVI-Sim folder in the SpecVI-Bench format: cv and wd, train and test, plus a variant file that is not used."
    folder = tmp_path_factory.mktemp("specvi")
    for task, pos, neg in [("cv", "cv_dn", "dme"), ("wd", "wd_da", "a_star")]:
        spectra = simulate(pos, 2, seed=1) + simulate(neg, 2, seed=2)
        for split in ("train", "test"): write_set(folder / f"{split}_{task}.parquet", spectra, [True, True, False, False], task)
    write_set(folder / "test_cv_sdss.parquet", spectra, [True, True, False, False], "cv")
    return folder


@pytest.fixture(scope="module")
def run_dir(specvi, tmp_path_factory):
    return export_verl(tmp_path_factory.mktemp("verl") / "run", "paper", data=specvi, model="/models/sft")


def first_row(path):
    return pq.read_table(path).slice(0, 1).to_pylist()[0]


def create_kwargs(row):
    return row["extra_info"]["tools_kwargs"][TOOL_NAME]["create_kwargs"]


async def one_call(tool, ck, arguments):
    iid, _ = await tool.create(create_kwargs=ck)
    try: return await tool.execute(iid, arguments)
    finally: await tool.release(iid)


# ---------------------------------------------------------------- generation (always)

def test_files(run_dir):
    files = {str(f.relative_to(run_dir)) for f in run_dir.rglob("*")}
    assert {"config/speco3_grpo.yaml", "config/tool_config.yaml", TOOL_MODULE, REWARD_MODULE, "run.sh",
            "requirements-verl.txt", "README.md", "data/README.md", "data/train_cv.parquet", "data/train_wd.parquet",
            "data/test_cv.parquet", "data/test_wd.parquet"} <= files
    assert "data/test_cv_sdss.parquet" not in files  # variants are not validation sets
    assert os.access(run_dir / "run.sh", os.X_OK)
    assert subprocess.run(["bash", "-n", str(run_dir / "run.sh")]).returncode == 0


def test_config_matches_profile(run_dir):
    cfg = yaml.safe_load((run_dir / "config" / "speco3_grpo.yaml").read_text())
    assert cfg == grpo_config("paper", model="/models/sft", train_files=["data/train_cv.parquet", "data/train_wd.parquet"],
                              val_files=["data/test_cv.parquet", "data/test_wd.parquet"], run_dir=str(run_dir.resolve()))
    a, r = cfg["actor_rollout_ref"], cfg["actor_rollout_ref"]["rollout"]
    assert cfg["defaults"] == ["ppo_trainer", "_self_"] and cfg["hydra"]["searchpath"] == ["pkg://verl.trainer.config"]
    assert cfg["algorithm"]["adv_estimator"] == "grpo"
    assert (a["actor"]["use_kl_loss"], a["actor"]["kl_loss_coef"], cfg["algorithm"]["use_kl_in_reward"],
            cfg["algorithm"]["kl_ctrl"]["kl_coef"]) == (False, 0.0, False, 0.0)
    assert r["n"] == 8 and r["multi_turn"]["enable"] is True
    assert (r["multi_turn"]["max_user_turns"], r["multi_turn"]["max_assistant_turns"]) == (8, 8)  # the authors' config
    assert r["multi_turn"]["max_tool_response_length"] == 1024 and r["n"] == 8
    assert r["multi_turn"]["tool_config_path"] == "${speco3.run_dir}/config/tool_config.yaml"
    assert a["actor"]["optim"]["lr"] == 1e-6
    assert (cfg["data"]["train_batch_size"], a["actor"]["ppo_mini_batch_size"]) == (64, 32)
    assert (cfg["data"]["max_response_length"], cfg["data"]["max_prompt_length"]) == (32768, 2048)  # the authors' config
    assert response_length() == 10240 < cfg["data"]["max_response_length"]
    act = cfg["actor_rollout_ref"]["actor"]
    assert (act["optim"]["lr"], act["ppo_mini_batch_size"], act["use_kl_loss"], act["entropy_coeff"]) == (1e-6, 32, False, 0.0)
    assert (cfg["data"]["train_batch_size"], cfg["trainer"]["total_epochs"]) == (64, 3)
    assert cfg["data"]["image_key"] == "images" and cfg["data"]["prompt_key"] == "prompt"
    assert cfg["reward"]["custom_reward_function"] == {"path": "${speco3.run_dir}/speco3_verl_reward.py",
                                                       "name": "compute_score", "reward_kwargs": {"alpha": 0.2}}
    assert a["model"]["custom_chat_template"] == chat_template() and a["model"]["path"] == "/models/sft"
    assert (cfg["trainer"]["nnodes"], cfg["trainer"]["n_gpus_per_node"]) == (1, 8)
    assert cfg["speco3"]["run_dir"] == str(run_dir.resolve())


def test_gpu_profile_and_layouts(tmp_path):
    cfg = grpo_config("gpu")
    assert (cfg["trainer"]["n_gpus_per_node"], cfg["actor_rollout_ref"]["rollout"]["tensor_model_parallel_size"]) == (1, 1)
    assert cfg["actor_rollout_ref"]["model"]["path"] == VERL["gpu"].model
    assert grpo_config("paper", nnodes=2)["trainer"]["nnodes"] == 2
    with pytest.raises(ValueError, match="do not divide"): grpo_config("paper", nnodes=3)
    with pytest.raises(ValueError, match="speco3.grpo"): export_verl(tmp_path / "x", "cpu")
    assert not (tmp_path / "x").exists()


def test_tool_config(run_dir):
    tc = yaml.safe_load((run_dir / "config" / "tool_config.yaml").read_text())
    assert tc == tool_config()
    (tool,) = tc["tools"]
    assert tool["class_name"] == f"{TOOL_MODULE[:-3]}.{TOOL_CLASS}" and tool["tool_schema"] == TOOL_SCHEMA
    assert tool["config"]["type"] == "native"


def test_data_links(run_dir, specvi):
    for name in ("train_cv.parquet", "test_wd.parquet"):
        assert (run_dir / "data" / name).resolve() == (specvi / name).resolve()
    assert str(specvi.resolve()) in (run_dir / "data" / "README.md").read_text()


def test_without_data(tmp_path):
    bare = export_verl(tmp_path / "bare", "paper")
    cfg = yaml.safe_load((bare / "config" / "speco3_grpo.yaml").read_text())
    assert [Path(f).name for f in cfg["data"]["train_files"]] == ["train_cv.parquet", "train_cc.parquet", "train_gm.parquet",
                                                                  "train_ss.parquet", "train_wd.parquet"]
    assert len(cfg["data"]["val_files"]) == 5 and "speco3 bench build" in (bare / "data" / "README.md").read_text()
    res = subprocess.run(["bash", str(bare / "run.sh")], capture_output=True, text=True)
    assert res.returncode == 1 and "missing" in res.stderr and "data/README.md" in res.stderr


def test_run_sh_launches_verl(run_dir, tmp_path):
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "$PYTHONPATH"\necho "$@"\n'); fake.chmod(0o755)
    res = subprocess.run(["bash", str(run_dir / "run.sh"), "trainer.total_epochs=1"], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": str(fake), "GPUS_PER_NODE": "4"})
    assert res.returncode == 0, res.stderr
    here = str(run_dir.resolve())
    pythonpath, args = res.stdout.splitlines()[:2]
    assert pythonpath.split(":")[0] == here  # the tool module is importable by name in Ray workers
    for part in ["-m verl.trainer.main_ppo", f"--config-path={here}/config", "--config-name=speco3_grpo",
                 f"speco3.run_dir={here}", "trainer.nnodes=1", "trainer.n_gpus_per_node=4", "trainer.total_epochs=1"]:
        assert part in args, part
    assert list((run_dir / "logs").glob("train-*.log"))


def test_overwrite(run_dir, specvi):
    with pytest.raises(FileExistsError, match="overwrite"): export_verl(run_dir, "paper", data=specvi)
    (run_dir / "checkpoints").mkdir(exist_ok=True); (run_dir / "checkpoints" / "keep").write_text("x")
    export_verl(run_dir, "paper", data=specvi, model="/models/sft", overwrite=True)
    assert (run_dir / "checkpoints" / "keep").exists()
    assert yaml.safe_load((run_dir / "config" / "speco3_grpo.yaml").read_text())["actor_rollout_ref"]["model"]["path"] == "/models/sft"


def test_bad_data(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"): export_verl(tmp_path / "o", data=tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="found 0 train"): export_verl(tmp_path / "o", data=tmp_path / "empty")
    (tmp_path / "cols").mkdir()
    import pandas as pd
    for name in ("train_cv.parquet", "test_cv.parquet"): pd.DataFrame({"prompt": ["x"]}).to_parquet(tmp_path / "cols" / name)
    with pytest.raises(ValueError, match="lacks the SpecVI-Bench column"): export_verl(tmp_path / "o", data=tmp_path / "cols")
    assert not (tmp_path / "o").exists()


def test_requirements(run_dir):
    lines = [l for l in (run_dir / "requirements-verl.txt").read_text().splitlines() if l and not l.startswith("#")]
    assert lines[:4] == VERL_REQUIREMENTS
    settings = Path(__file__).resolve().parents[1] / "settings.ini"
    if settings.exists():  # the core requirements follow settings.ini
        cp = configparser.ConfigParser(delimiters=["="]); cp.read(settings)
        name = lambda r: re.split(r"[<>=!;\[ ]", r, maxsplit=1)[0].lower()
        assert {name(r) for r in lines[4:]} == {name(r) for r in cp["DEFAULT"]["requirements"].split()}
        assert {name(r) for r in core_requirements()} == {name(r) for r in cp["DEFAULT"]["requirements"].split()}


# ---------------------------------------------------------------- the authors' recipe (always)
# Their released verl config (Maxwell-Jia/spec-o3, recipe/spec_o3/configs/spec_o3.yaml) and their tool's step reward
# (tests/conformance/tool: -0.05 for every failed call). Each value is either taken or, where ours differs, the
# difference is explained in nbs/15_verl.ipynb ("The authors' recipe").
AUTHORS = {"data.filter_overlong_prompts": False, "actor_rollout_ref.rollout.agent.num_workers": 2, "failed call step reward": -0.05}


def test_filter_overlong_prompts_is_the_authors(run_dir):
    for name in VERL:
        data = grpo_config(name)["data"]
        assert (data["filter_overlong_prompts"], data["truncation"]) == (AUTHORS["data.filter_overlong_prompts"], "error")
    text = (run_dir / "config" / "speco3_grpo.yaml").read_text()
    assert "# data.filter_overlong_prompts: the authors' value" in text


def test_failed_call_step_reward_is_the_authors():
    cases = [json.loads(l) for l in (Path(__file__).parent / "conformance" / "tool" / "cases.jsonl").read_text().splitlines() if l.strip()]
    assert {c["tool_reward"] for c in cases if not c["success"]} == {AUTHORS["failed call step reward"]} == {ERROR_REWARD}


def test_agent_workers_differ_with_a_reason():
    for name, p in VERL.items():
        assert grpo_config(name)["actor_rollout_ref"]["rollout"]["agent"]["num_workers"] == AGENT_WORKERS
        assert p.train_batch_size * ROLLOUT_N % AGENT_WORKERS == 0   # verl splits a rollout batch evenly over the workers
    import speco3.verl as sv
    odd = VerlProfile("odd", "m", 1, 1, train_batch_size=3, ppo_mini_batch_size=1, gpu_memory_utilization=0.5, offload=True)
    grpo_config(odd)   # 3 x 8 rollouts split over 8 workers
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sv, "AGENT_WORKERS", 16)   # 24 rollouts do not split over 16 workers
        with pytest.raises(ValueError, match="agent-loop workers"): grpo_config(odd)
    assert AGENT_WORKERS != AUTHORS["actor_rollout_ref.rollout.agent.num_workers"]
    nb = Path(__file__).resolve().parents[1] / "nbs" / "15_verl.ipynb"
    if nb.exists():  # the reason is written where the export is explained
        cells = ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "markdown"]
        (section,) = [c for c in cells if c.startswith("## The authors' recipe")]
        for key in ("filter_overlong_prompts", "num_workers", "−0.05"): assert key in section, key


def test_reward_module_ignores_step_rewards(run_dir):
    rew = _load_module(run_dir / REWARD_MODULE)
    for text, truth in [(GOOD, "YES"), (SLOPPY, "NO")]:
        plain = rew.compute_score("cv", text, truth, extra_info={"index": 0})["score"]
        assert rew.compute_score("cv", text, truth, extra_info={"index": 0, "tool_rewards": [ERROR_REWARD] * 3})["score"] == plain


# ---------------------------------------------------------------- the adapters against stand-ins (always)

def test_tool_module_with_stand_ins(run_dir):
    ck = create_kwargs(first_row(run_dir / "data" / "train_cv.parquet"))
    with _stand_in_verl():
        mod = _load_module(run_dir / TOOL_MODULE)
        tool = mod.SpectralVisualizationVerlTool({"type": "native", "style": "fast"}, None)
        resp, reward, metrics = asyncio.run(one_call(tool, ck, {"wavelength_range": [6480, 6650], "label": "H-alpha"}))
        bad, bad_reward, bad_metrics = asyncio.run(one_call(tool, ck, {"wavelength_range": [6480]}))
    assert tool.name == TOOL_NAME and tool.style == "fast"
    assert tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) == TOOL_SCHEMA
    assert isinstance(resp.image, list) and isinstance(resp.image[0], Image.Image) and reward == 0.0 and metrics["ok"]
    direct = SpectralVisualizationTool.from_create_kwargs(ck, style="fast").call({"wavelength_range": [6480, 6650], "label": "H-alpha"})
    assert resp.text == direct.text and np.array_equal(np.asarray(resp.image[0]), np.asarray(direct.image))
    assert bad.text.startswith("Error:") and bad.image is None and bad_metrics["error"] == "invalid"   # the authors' one error line for any bad window
    assert bad_reward == ERROR_REWARD == -0.05   # the authors' step reward for a failed call
    assert tool._tools == {}
    assert "verl.tools.base_tool" not in sys.modules or HAVE_VERL


def test_reward_module(run_dir):
    rew = _load_module(run_dir / REWARD_MODULE)
    for text, truth in [(GOOD, "YES"), (GOOD, "NO"), (SLOPPY, "YES"), (SLOPPY, "NO"), ("", "NO")]:
        out, ref = rew.compute_score("cv", text, truth, extra_info={"index": 3}), score(text, truth, alpha=0.2)
        assert out["score"] == ref["score"] and out["acc"] == float(ref["correct"]) and out["format_ok"] == float(ref["format_ok"])
        assert isinstance(out["pred"], str) and all(isinstance(v, float) for k, v in out.items() if k != "pred")
    assert [rew.compute_score("cv", t, g)["score"] for t, g in [(GOOD, "YES"), (SLOPPY, "YES"), (GOOD, "NO"), (SLOPPY, "NO")]] == [1.0, 0.8, 0.0, -0.2]
    assert rew.compute_score("cv", SLOPPY, "YES", alpha=0.5)["score"] == 0.5


def imports(path):
    found = set()
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.ImportFrom): found.add(node.module)
        elif isinstance(node, ast.Import): found |= {a.name for a in node.names}
    return found


def test_generated_modules_import_only_the_core(run_dir):
    assert {m for m in imports(run_dir / TOOL_MODULE) if m.startswith("speco3")} == {"speco3.tool"}
    assert imports(run_dir / REWARD_MODULE) == {"speco3.reward"}
    code = (f"import sys\nfrom speco3.verl import _stand_in_verl, _load_module\n"
            f"with _stand_in_verl(): _load_module({str(run_dir / TOOL_MODULE)!r})\n"
            f"_load_module({str(run_dir / REWARD_MODULE)!r})\n"
            "print(sorted(m for m in sys.modules if m.startswith('speco3.')))\n"
            "print([m for m in ('torch', 'transformers', 'trl', 'peft', 'accelerate') if m in sys.modules])")
    mods, frameworks = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    from speco3.profiles import CORE_MODULES  # design §2
    assert set(json.loads(mods.replace("'", '"'))) <= {f"speco3.{m}" for m in {*CORE_MODULES, "verl"}} and frameworks == "[]"


# ---------------------------------------------------------------- with verl's real classes (verl environment only)

@pytest.fixture(scope="module")
def verl_config(run_dir):
    from hydra import compose, initialize_config_dir
    with initialize_config_dir(config_dir=str(run_dir / "config"), version_base=None):
        return compose(config_name="speco3_grpo", overrides=[f"speco3.run_dir={run_dir.resolve()}"])


@needs_verl
def test_real_config_composes_and_validates(verl_config, run_dir):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    cfg = verl_config
    # what verl must read: the export's own config for the profile the run directory was written with, so these
    # assertions follow the export and cannot go stale when a setting changes
    ours = yaml.safe_load((run_dir / "config" / "speco3_grpo.yaml").read_text())
    p = VERL[ours["speco3"]["profile"]]
    want_r, want_a = ours["actor_rollout_ref"]["rollout"], ours["actor_rollout_ref"]["actor"]
    assert not need_reference_policy(cfg) and not need_critic(cfg)  # no KL: no reference model; GRPO: no critic
    validate_config(cfg, use_reference_policy=False, use_critic=False)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    # verl copies data.max_{prompt,response}_length into the rollout's prompt_length and response_length
    assert (rollout.name, rollout.n, rollout.response_length, rollout.prompt_length) == (
        want_r["name"], ROLLOUT_N, ours["data"]["max_response_length"], ours["data"]["max_prompt_length"])
    assert rollout.response_length >= response_length()  # the worst-case budget fits
    assert (rollout.tensor_model_parallel_size, rollout.gpu_memory_utilization) == (p.tensor_parallel, p.gpu_memory_utilization)
    mt, want_mt = rollout.multi_turn, want_r["multi_turn"]
    assert (mt.enable, mt.max_assistant_turns, mt.max_user_turns, mt.max_parallel_calls, mt.format, mt.max_tool_response_length) == (
        True, want_mt["max_assistant_turns"], want_mt["max_user_turns"], want_mt["max_parallel_calls"], want_mt["format"],
        want_mt["max_tool_response_length"])
    assert mt.tool_config_path == f"{run_dir.resolve()}/config/tool_config.yaml" and Path(mt.tool_config_path).exists()
    assert (rollout.agent.default_agent_loop, rollout.agent.num_workers) == ("tool_agent", AGENT_WORKERS)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert (actor.use_kl_loss, actor.optim.lr, actor.ppo_mini_batch_size, actor.strategy) == (
        False, want_a["optim"]["lr"], p.ppo_mini_batch_size, "fsdp")
    assert (cfg.data.train_batch_size, cfg.data.filter_overlong_prompts, cfg.data.truncation) == (p.train_batch_size, False, "error")
    algo = omega_conf_to_dataclass(cfg.algorithm)
    assert (algo.adv_estimator, algo.use_kl_in_reward, algo.kl_ctrl.kl_coef) == ("grpo", False, 0.0)
    # verl builds its reward manager from reward.reward_manager itself (its RewardConfig dataclass does not convert,
    # even from verl's own defaults); the reward function is checked in test_real_reward_loading
    assert cfg.reward.reward_manager.name == "naive" and cfg.reward.custom_reward_function.name == "compute_score"
    files = OmegaConf.to_container(cfg.data, resolve=True)["train_files"]
    assert files == [f"{run_dir.resolve()}/data/train_cv.parquet", f"{run_dir.resolve()}/data/train_wd.parquet"]
    assert all(Path(f).exists() for f in files)
    assert cfg.data.tool_config_path == mt.tool_config_path  # verl's data config follows the rollout's tool config
    assert cfg.actor_rollout_ref.model.custom_chat_template == chat_template()


def leaves(d, path=""):
    for k, v in d.items():
        key = f"{path}.{k}" if path else k
        if isinstance(v, dict) and v: yield from leaves(v, key)
        else: yield key


@needs_verl
def test_real_config_keys_exist_in_verl_schema(run_dir):
    "Every key we set is a key of verl 0.9.1's own ppo_trainer config (Hydra would accept a misspelt one silently)."
    import verl
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        default = compose(config_name="ppo_trainer")
    ours = yaml.safe_load((run_dir / "config" / "speco3_grpo.yaml").read_text())
    ours = {k: v for k, v in ours.items() if k not in ("hydra", "defaults", "speco3")}  # Hydra's keys and our own
    extensions = {"reward.custom_reward_function.reward_kwargs.alpha"}  # read by verl's get_custom_reward_fn, not in its yaml
    def known(key):  # present in verl's schema, even as a required ??? value (rollout.name)
        parent, _, last = key.rpartition(".")
        node = OmegaConf.select(default, parent, default=None) if parent else default
        return node is not None and last in list(node.keys())
    unknown = [k for k in leaves(ours) if k not in extensions and not known(k)]
    assert unknown == []
    assert len(list(leaves(ours))) > 50


@needs_verl
def test_real_tool_through_verl(run_dir, monkeypatch):
    import datasets
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.experimental.agent_loop.tool_parser import FunctionCall
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import ToolResponse
    from verl.tools.tool_registry import initialize_tools_from_config
    monkeypatch.syspath_prepend(str(run_dir))  # what run.sh's PYTHONPATH does for the Ray workers
    (tool,) = initialize_tools_from_config(str(run_dir / "config" / "tool_config.yaml"))
    assert isinstance(tool, BaseTool) and type(tool).__name__ == TOOL_CLASS and tool.name == TOOL_NAME
    assert tool.tool_schema.model_dump(exclude_unset=True, exclude_none=True) == TOOL_SCHEMA  # items/minItems kept
    # a data row read as verl's RLHFDataset reads it, and the tools_kwargs it hands to the agent loop
    row = datasets.load_dataset("parquet", data_files=str(run_dir / "data" / "train_wd.parquet"))["train"][0]
    tools_kwargs = row["extra_info"]["tools_kwargs"]
    # verl's own tool-call path: create(create_kwargs=...) -> execute -> release
    loop = object.__new__(ToolAgentLoop)
    loop.tools, loop.max_tool_response_length, loop.tool_response_truncate_side = {tool.name: tool}, 1024, "middle"
    agent = type("AgentData", (), {"_active_tools": {tool.name: tool}})()
    call = FunctionCall(name=TOOL_NAME, arguments=json.dumps({"wavelength_range": [4800, 4920], "label": "H-beta"}))
    resp, reward, _ = asyncio.run(loop._call_tool(call, tools_kwargs, agent))
    assert isinstance(resp, ToolResponse) and reward == 0.0
    assert resp.text.startswith("Generated spectral visualization") and "H-beta" in resp.text
    assert len(resp.image) == 1 and isinstance(resp.image[0], Image.Image)
    bad = FunctionCall(name=TOOL_NAME, arguments=json.dumps({"wavelength_range": "4800-4920"}))
    resp, reward, _ = asyncio.run(loop._call_tool(bad, tools_kwargs, agent))
    assert resp.text.startswith("Error:") and not resp.image
    assert reward == ERROR_REWARD   # the authors' step reward reaches verl's agent loop (agent_data.tool_rewards)
    assert tool._tools == {}  # released after each call


@needs_verl
def test_real_tool_on_a_real_lamost_row(run_dir, monkeypatch):
    monkeypatch.syspath_prepend(str(run_dir))
    from verl.tools.tool_registry import initialize_tools_from_config
    (tool,) = initialize_tools_from_config(str(run_dir / "config" / "tool_config.yaml"))
    s = read_spectrum(real_spectra_dir() / "spectra.parquet", id="LAMOST:spec-55862-B6212_sp08-147")
    ck = create_kwargs(to_specvi_row(s, "cv", False, prompt=[]))
    resp, reward, metrics = asyncio.run(one_call(tool, ck, {"wavelength_range": [6480, 6650], "label": "H-alpha"}))
    assert metrics["ok"] and isinstance(resp.image[0], Image.Image) and resp.image[0].size == (552, 352)


@needs_verl
def test_real_reward_loading(verl_config):
    from verl.trainer.ppo.reward import get_custom_reward_fn
    fn = get_custom_reward_fn(verl_config)
    out = fn(data_source="cv", solution_str=SLOPPY, ground_truth="YES", extra_info={"num_turns": 2})
    assert out["score"] == pytest.approx(0.8) and out["acc"] == 1.0 and out["pred"] == "YES"
    # verl 0.9.1 hands the tool's step rewards to the reward only as extra_info["tool_rewards"]; they do not count
    out = fn(data_source="cv", solution_str=SLOPPY, ground_truth="YES", extra_info={"num_turns": 2, "tool_rewards": [ERROR_REWARD]})
    assert out["score"] == pytest.approx(0.8)
    from omegaconf import open_dict
    cfg = verl_config.copy()
    with open_dict(cfg): cfg.reward.custom_reward_function.reward_kwargs.alpha = 0.5
    assert get_custom_reward_fn(cfg)(data_source="cv", solution_str=SLOPPY, ground_truth="YES")["score"] == pytest.approx(0.5)
