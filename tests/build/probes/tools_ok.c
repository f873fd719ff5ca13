#include "vmmc/config.h"
#include "vmmc/fm.h"
#include "vmmc/launch.h"
#include "vmmc/vmmc.h"
