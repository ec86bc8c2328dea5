#define BOOST_TEST_MODULE member
#include <boost/test/unit_test.hpp>
