#include "controllers/operator.h"

#include "controllers/kuberay.h"

#include <thread>
#include <vector>

namespace kubesim::controllers {

namespace {

// Both controllers of the operator, each with its own client identity (rayjob-controller,
// raycluster-controller) and event source.
class KubeRayOperator : public Controller {
 public:
  void Start(const ControllerContext& ctx) override {
    parts_.push_back(NewRayClusterController());
    parts_.push_back(NewRayJobController());
    for (auto& p : parts_)
      p->Start(ctx);
  }
  void Stop() override {
    std::vector<std::thread> stoppers;
    for (auto& p : parts_)
      stoppers.emplace_back([&p] { p->Stop(); });
    for (auto& t : stoppers)
      t.join();
    parts_.clear();
  }
  ~KubeRayOperator() override { Stop(); }

 private:
  std::vector<std::unique_ptr<Controller>> parts_;
};

}  // namespace

KUBESIM_REGISTER_CONTROLLER({"operator",
                             [] { return std::make_unique<KubeRayOperator>(); },
                             {{kReconcileConcurrencyFlag,
                               "KubeRay operator: reconciles at once in each of its controllers "
                               "(KubeRay's --reconcile-concurrency, default 1 there; kubesim's "
                               "default: 16 RayJob and 4 RayCluster workers)",
                               CheckPositiveInt}},
                             30});

}  // namespace kubesim::controllers
