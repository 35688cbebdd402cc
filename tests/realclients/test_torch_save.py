"""torch.save (a strictly sequential zip writer) of a state dict to a guarded name on the hdfs profile:
it works without the library and under it, with no report, bytes identical to a local run."""
from e2e_support import files_of, violations
from realclients_support import ClientTest, client, main


class TorchSaveTest(ClientTest):
    def test_torch_save_hdfs_with_library_guarded_name(self):
        self.mount("hdfs")
        # model.pt is guarded here, so every write of the zip writer is checked against the end of file.
        proc = self.run_lib(client("torch_save", self.m("out")), APPENDGUARD_PATHS="*.pt:*.safetensors",
                            APPENDGUARD_TRACE="1")
        self.assertOk(proc)
        self.assertEqual(violations(proc.stderr), [])
        traced_writes = [line for line in proc.stderr.splitlines()
                         if line.startswith("appendguard: trace:") and " write fd=" in line and "/out/model.pt " in line]
        self.assertTrue(traced_writes, "no write to model.pt was traced: the file was not guarded")
        self.assertTreesEqual(files_of(self.b("out")), self.reference("torch_save"))
        self.assertNoMountRefusal()

    def test_torch_save_hdfs_without_library(self):
        self.mount("hdfs")
        proc = self.run_plain(client("torch_save", self.m("out")))
        self.assertOk(proc)
        self.assertTreesEqual(files_of(self.b("out")), self.reference("torch_save"))
        self.assertNoMountRefusal()


if __name__ == "__main__":
    main()
