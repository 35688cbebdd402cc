// `appendguard run`'s one-line warning for a launcher that would not pass the library on to its workers.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/launch_options.h"

using namespace appendguard;

namespace {

struct Fixture {
  std::map<std::string, std::optional<std::string>> files;
  LauncherContext context;

  explicit Fixture(std::string program = "") {
    context.program = std::move(program);
    context.environment = {{"LD_PRELOAD", "/lib/libappendguard.so"},
                           {"APPENDGUARD", "enforce"},
                           {"APPENDGUARD_LOG", "/logs/ag-%r.log"},
                           {"HOME", "/home/u"},
                           {"APPENDGUARD_LIBRARY", "/tooling/not-needed.so"},
                           {"PATH", "/usr/bin"}};
    context.read_file = [this](const std::string& path) -> std::optional<std::string> {
      auto it = files.find(path);
      return it == files.end() ? std::nullopt : it->second;
    };
  }

  std::string warning(const std::vector<std::string>& command) const {
    return launcher_warning(command, context);
  }
};

}  // namespace

TEST_CASE("launchers that pass the environment on get no warning") {
  Fixture f;
  CHECK(f.warning({"torchrun", "--nproc-per-node", "2", "train.py"}).empty());
  CHECK(f.warning({"accelerate", "launch", "train.py"}).empty());
  CHECK(f.warning({"python", "train.py"}).empty());
  CHECK(f.warning({"srun", "-n", "2", "python", "train.py"}).empty());
  CHECK(f.warning({"srun", "--export=ALL", "python", "train.py"}).empty());
  CHECK(f.warning({"sbatch", "--export=ALL,X=1", "job.sh"}).empty());
  CHECK(f.warning({"deepspeed", "--num_gpus", "2", "train.py"}).empty());
  CHECK(f.warning({"ray", "start", "--head"}).empty());
  CHECK(f.warning({}).empty());
}

TEST_CASE("Open MPI's mpirun without -x for the library's variables is warned about, naming them") {
  Fixture f("/usr/bin/orterun");
  std::string w = f.warning({"mpirun", "-np", "2", "python", "train.py"});
  CHECK(w ==
        "appendguard run: warning: Open MPI's mpirun passes to ranks on other nodes only the variables named "
        "with "
        "-x: add -x LD_PRELOAD -x APPENDGUARD -x APPENDGUARD_LOG, or start each rank with `mpirun ... "
        "appendguard run -- COMMAND` (docs/launching.md)");
  CHECK(w.find('\n') == std::string::npos);
  // Tooling variables are not needed by the workers.
  CHECK(w.find("APPENDGUARD_LIBRARY") == std::string::npos);
  CHECK(f.warning({"mpiexec", "-x", "LD_PRELOAD", "-np", "2", "python"})
            .find("add -x APPENDGUARD -x "
                  "APPENDGUARD_LOG,") != std::string::npos);
  CHECK(f.warning({"mpirun", "-x", "LD_PRELOAD", "-x", "APPENDGUARD=1", "-x", "APPENDGUARD_LOG", "python"})
            .empty());
  CHECK(
      f.warning({"mpirun", "--mca", "mca_base_env_list", "LD_PRELOAD;APPENDGUARD;APPENDGUARD_LOG", "python"})
          .empty());
  f.context.environment["OMPI_MCA_mca_base_env_list"] = "LD_PRELOAD;APPENDGUARD;APPENDGUARD_LOG";
  CHECK(f.warning({"mpirun", "python"}).empty());
}

TEST_CASE("MPICH's and Intel MPI's mpirun pass the environment on") {
  CHECK(Fixture("/usr/bin/mpiexec.hydra").warning({"mpirun", "-np", "2", "python"}).empty());
  CHECK(Fixture("/usr/lib/x86_64-linux-gnu/mpich/bin/mpiexec").warning({"mpiexec", "python"}).empty());
  CHECK_FALSE(Fixture("/usr/bin/orterun").warning({"mpirun", "python"}).empty());
  CHECK_FALSE(Fixture("").warning({"mpirun", "python"}).empty());
}

TEST_CASE("srun and sbatch with an export list that leaves the variables out") {
  Fixture f;
  CHECK(f.warning({"srun", "--export=NONE", "python"}) ==
        "appendguard run: warning: srun with export list 'NONE' (--export) does not pass LD_PRELOAD, "
        "APPENDGUARD, "
        "APPENDGUARD_LOG to the job: use --export=ALL or add them to the list (docs/launching.md)");
  CHECK(f.warning({"srun", "--export", "PATH,LD_PRELOAD", "python"})
            .find("does not pass APPENDGUARD, "
                  "APPENDGUARD_LOG") != std::string::npos);
  CHECK(f.warning({"srun", "--export=LD_PRELOAD,APPENDGUARD,APPENDGUARD_LOG=/x", "python"}).empty());
  f.context.environment["SBATCH_EXPORT"] = "NONE";
  CHECK(f.warning({"sbatch", "job.sh"}).find("(SBATCH_EXPORT)") != std::string::npos);
  CHECK(f.warning({"srun", "python"}).empty());  // SBATCH_EXPORT is sbatch's
  f.context.environment["SLURM_EXPORT_ENV"] = "NIL";
  CHECK_FALSE(f.warning({"srun", "python"}).empty());
  CHECK(f.warning({"srun", "--export=ALL", "python"}).empty());  // the option wins over the variable
}

TEST_CASE("deepspeed's multi-node launcher needs the variables in .deepspeed_env") {
  Fixture f;
  f.files["hosts"] = "node1 slots=8\nnode2 slots=8\n";
  std::string w = f.warning({"deepspeed", "--hostfile", "hosts", "train.py"});
  CHECK(w ==
        "appendguard run: warning: deepspeed's multi-node launcher passes on only some variables (NCCL_*, "
        "PYTHON*, "
        "...) and the NAME=VALUE lines of .deepspeed_env in ~ or the working directory: add LD_PRELOAD, "
        "APPENDGUARD, APPENDGUARD_LOG there (docs/launching.md)");
  CHECK_FALSE(f.warning({"deepspeed", "--force_multi", "train.py"}).empty());
  CHECK_FALSE(f.warning({"deepspeed", "--num_nodes=2", "train.py"}).empty());
  CHECK(f.warning({"deepspeed", "--hostfile", "absent", "train.py"}).empty());  // no hostfile: one node
  CHECK(f.warning({"deepspeed", "--hostfile", "hosts", "--no_ssh", "train.py"}).empty());
  f.files["/job/hostfile"] = "node1 slots=8\n";
  CHECK_FALSE(f.warning({"deepspeed", "train.py"}).empty());  // DeepSpeed's default hostfile

  f.files["/home/u/.deepspeed_env"] = "LD_PRELOAD=/lib/libappendguard.so\nAPPENDGUARD=1\n";
  CHECK(f.warning({"deepspeed", "--hostfile", "hosts", "train.py"}).find("add APPENDGUARD_LOG there") !=
        std::string::npos);
  f.files["./.deepspeed_env"] = "APPENDGUARD_LOG=/logs/ag-%r.log\n";
  CHECK(f.warning({"deepspeed", "--hostfile", "hosts", "train.py"}).empty());
  f.context.environment["DS_ENV_FILE"] = "other_env";
  CHECK(f.warning({"deepspeed", "--hostfile", "hosts", "train.py"}).find("lines of other_env") !=
        std::string::npos);
}

TEST_CASE("ray job submit needs the variables in its runtime env") {
  Fixture f;
  CHECK(f.warning({"ray", "job", "submit", "--", "python", "job.py"}) ==
        "appendguard run: warning: `ray job submit` runs the job on the cluster, which does not inherit this "
        "environment: "
        "give LD_PRELOAD, APPENDGUARD, APPENDGUARD_LOG in its runtime env's env_vars (--runtime-env-json; "
        "docs/launching.md)");
  CHECK(f.warning({"ray", "job", "submit", "--runtime-env-json",
                   R"({"env_vars": {"LD_PRELOAD": "/l.so", "APPENDGUARD": "1", "APPENDGUARD_LOG": "/x"}})",
                   "--", "python", "job.py"})
            .empty());
  f.files["env.yaml"] = "env_vars:\n  LD_PRELOAD: /l.so\n  APPENDGUARD: '1'\n  APPENDGUARD_LOG: /x\n";
  CHECK(f.warning({"ray", "job", "submit", "--runtime-env", "env.yaml", "--", "python", "job.py"}).empty());
}
