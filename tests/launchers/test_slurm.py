"""docs/launching.md's SLURM recipes, run as written on a one-node cluster this test starts and stops:
munged, slurmctld and slurmd on 127.0.0.1 with a minimal slurm.conf in a temporary folder (root's
SlurmUser, no cgroups, no accounting), then `sbatch --wait` of the batch script and the `srun -n 2` line.
The daemons carry the test's marker and are stopped in tearDownClass; every one still running then is
killed and fails the test."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from launchers_support import LauncherTest, kill_marked, main, new_run_id, recipe, substitute


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SLURM_CONF = """ClusterName=agtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=5
NodeName=agnode NodeHostname={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=agpart Nodes=agnode Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class SlurmTest(LauncherTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster_id = new_run_id()
        cls.dir = tempfile.mkdtemp(prefix="agslurm-", dir="/tmp")  # short: munge's socket path
        os.chmod(cls.dir, 0o755)
        try:
            cls.start_cluster()
        except BaseException:
            cls.stop_cluster()
            raise

    @classmethod
    def tearDownClass(cls):
        left = cls.stop_cluster()
        super().tearDownClass()
        if left:
            raise AssertionError(f"SLURM or munge processes still running after the cluster was stopped (killed now): {left}")

    @classmethod
    def daemon(cls, argv, name):
        env = dict(os.environ, AG_LAUNCHERS_RUN=cls.cluster_id)
        env = {k: v for k, v in env.items() if not k.startswith("APPENDGUARD") and k != "LD_PRELOAD"}
        with open(os.path.join(cls.dir, f"{name}.out"), "w") as out:
            return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    @classmethod
    def start_cluster(cls):
        d = cls.dir
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(d, sub))
        cls.conf = os.path.join(d, "slurm.conf")
        with open(cls.conf, "w") as f:
            f.write(SLURM_CONF.format(dir=d, ctld_port=free_port(), slurmd_port=free_port(),
                                      host=socket.gethostname()))
        subprocess.run(["mungekey", "--create", "--keyfile", f"{d}/munge.key"], check=True)
        cls.daemons = [cls.daemon(["munged", "--foreground", "--force", f"--key-file={d}/munge.key",
                                   f"--socket={d}/munge.sock", f"--pid-file={d}/munged.pid",
                                   f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"], "munged")]
        cls.wait_for(lambda: os.path.exists(f"{d}/munge.sock"), "munged's socket")
        cls.daemons.append(cls.daemon(["slurmctld", "-D", "-f", cls.conf], "slurmctld"))
        cls.daemons.append(cls.daemon(["slurmd", "-D", "-f", cls.conf, "-N", "agnode"], "slurmd"))

        def idle():
            proc = subprocess.run(["sinfo", "-h", "-o", "%T"], env=dict(os.environ, SLURM_CONF=cls.conf),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            return proc.stdout.strip() == "idle"
        cls.wait_for(idle, "the node to be idle (sinfo)")

    @classmethod
    def wait_for(cls, condition, what, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            for p in getattr(cls, "daemons", []):
                if p.poll() is not None:
                    break
            time.sleep(0.2)
        logs = ""
        for name in ("munged.out", "slurmctld.out", "slurmd.out", "slurmctld.log", "slurmd.log"):
            path = os.path.join(cls.dir, name)
            if os.path.exists(path):
                with open(path) as f:
                    logs += f"--- {name}:\n{f.read()[-3000:]}\n"
        raise AssertionError(f"waited {timeout} s for {what}\n{logs}")

    @classmethod
    def stop_cluster(cls):
        for p in reversed(getattr(cls, "daemons", [])):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(getattr(cls, "daemons", [])):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        left = kill_marked(cls.cluster_id, grace=5)
        shutil.rmtree(cls.dir, True)
        return left

    def environment(self, **extra):
        return super().environment(SLURM_CONF=self.conf, **extra)

    def test_sbatch_of_the_batch_script(self):
        script = substitute(recipe("SLURM", 0), self.doc_replacements(
            ("--nodes=4 --ntasks-per-node=8", "--nodes=1 --ntasks-per-node=2")))
        with open(os.path.join(self.work, "job.sh"), "w") as f:
            f.write(script)
        out = os.path.join(self.work, "job.out")
        proc = self.run_recipe(f"sbatch --wait --output={out} job.sh\n")
        with open(out) as f:
            job_output = f.read()
        print(job_output)
        proc.stdout += job_output
        self.check_ranks(proc)

    def test_srun(self):
        text = substitute(recipe("SLURM", 1), self.doc_replacements(("srun -n 32", "srun -n 2")))
        self.check_ranks(self.run_recipe(text))

    def test_warning_for_an_export_list(self):
        proc = self.run_recipe("appendguard run -- srun --export=NONE -n 1 /bin/true\n")
        self.assertOk(proc)
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("appendguard run: warning: srun")]
        self.assertEqual(len(warnings), 1, proc.stderr)
        self.assertIn("does not pass LD_PRELOAD, APPENDGUARD", warnings[0])


if __name__ == "__main__":
    main(programs=("munged", "mungekey", "slurmctld", "slurmd", "srun", "sbatch", "sinfo"))
