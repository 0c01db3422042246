#include "controllers/operator.h"

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
    for (auto it = parts_.rbegin(); it != parts_.rend(); ++it)
      (*it)->Stop();
    parts_.clear();
  }
  ~KubeRayOperator() override { Stop(); }

 private:
  std::vector<std::unique_ptr<Controller>> parts_;
};

}  // namespace

KUBESIM_REGISTER_CONTROLLER(
    {"operator", [] { return std::make_unique<KubeRayOperator>(); }, {}, 30});

}  // namespace kubesim::controllers
